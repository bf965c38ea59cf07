"""What the user writes: the recipe and its keys, Data-Juicer key compatibility, building ops, the RunContext."""
