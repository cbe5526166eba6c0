"""ember.random (to be written)."""
