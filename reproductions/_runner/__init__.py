"""The shared runner of the reproductions, and of the library's benchmarks (``benchmarks/``): ``common`` (the code a
result depends on, tables, statistics, figures, results pages, computing cells), ``cells`` (the cell store) and
``prose`` (the templated verdicts)."""
