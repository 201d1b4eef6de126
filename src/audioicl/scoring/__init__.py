"""The original's scoring rules, interval statistics, and scoring result folders into CSVs."""
