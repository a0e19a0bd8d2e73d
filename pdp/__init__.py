"""The policy decision point: policy input, engines, grants and decisions."""
