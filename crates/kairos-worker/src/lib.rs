//! Placeholder: the planner and dispatcher loops will live here. Nothing is implemented yet.
