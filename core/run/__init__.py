"""One batch through the ops and the run's books: the op chain, stat reuse, ledger, resume, early checks, output checks, summary, progress, estimates."""
