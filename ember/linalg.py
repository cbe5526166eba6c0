"""ember.linalg (to be written)."""
