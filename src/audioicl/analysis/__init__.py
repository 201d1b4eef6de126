"""What is made from scores: paired comparisons, the audit, the demo, reports and studies."""
