"""First numbers for the core: index build time and p50 search latency by mode, with the query-embedding
time alone in the same run, on the bundled sample and the 883 real skills (``skillsearch.bench.core_numbers``).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/core_numbers.py    # env: SKILLS_CATALOG, REPEATS
Output: an experiment record behind a past choice, not a current result; the last run is in git at 789a3b3.
"""

from skillsearch.bench.core_numbers import main

if __name__ == "__main__":
    main()
