"""The djx framework: recipes, registry, op base classes, executors, checks. Knows no concrete op."""
