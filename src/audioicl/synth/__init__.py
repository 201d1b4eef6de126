"""Procedural sound sources (percussion, ambience, Morse, speech, machines), deterministic from a seed."""
