"""FedStar (Tan et al., AAAI 2023) reproduced on flowergraph: Tables 1-3 (``run.py``, its grid, report and figures),
the structure embeddings' cost (``embeddings.py``) and the speed against the authors' code (``speed.py``)."""
