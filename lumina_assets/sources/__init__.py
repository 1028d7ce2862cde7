"""Paper sources: OpenAlex, arXiv, local folders and BEIR corpora, normalized into `Paper` records."""
