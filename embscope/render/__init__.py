"""Rendering: rich tables for people, one JSON document for programs, plots on request."""
