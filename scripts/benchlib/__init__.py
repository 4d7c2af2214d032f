"""scripts/bench's code: see the docstring of scripts/bench for what it measures and how."""
