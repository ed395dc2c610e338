"""Exporters: Label Studio annotations to a tidy long DataFrame, agreement and alignment (next milestone)."""
