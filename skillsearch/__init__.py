"""skillsearch."""
