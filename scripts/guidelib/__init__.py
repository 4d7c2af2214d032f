"""scripts/guide's parts: `compile` type-checks the guide's Swift blocks."""
