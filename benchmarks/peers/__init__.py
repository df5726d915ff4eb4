"""Side-by-side runs against peer verifiers (Kimina Lean Server, LeanInteract); see compare.py."""
