"""A tokenizer with known answers for the dataset tests."""


class WordTokenizer:
    """One token per whitespace-separated word: a tokenizer with known answers."""

    name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


class WordIdTokenizer(WordTokenizer):
    """WordTokenizer that also gives ids: a word's id is its first-seen order (known answers)."""

    name = "word-ids"

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def ids(self, text: str) -> list[int]:
        return [self.vocab.setdefault(w, 1000 + len(self.vocab)) for w in text.split()]
