"""A tokenizer with known answers for the dataset tests."""


class WordTokenizer:
    """One token per whitespace-separated word: a tokenizer with known answers."""

    name = "words"

    def count(self, text: str) -> int:
        return len(text.split())
