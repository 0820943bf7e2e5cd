"""Pure functions over arrays and catalogues; results are plain dataclasses of numbers."""
