"""Signal measurements that recover what a clip holds, and transcripts perceived from audio."""
