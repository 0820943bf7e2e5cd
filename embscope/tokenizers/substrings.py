"""Which of many strings occur in a text, in one pass over the text (an Aho-Corasick automaton): checking each
string against the text costs (strings x text), and a vocabulary of 24,000 user-defined tokens, each encoded
once, made that 24,000^2 searches. Built once per vocabulary, in time linear in the strings' total length."""

from __future__ import annotations

from collections import deque


class Substrings:
    """The automaton of `strings` (non-empty); `found(text)` gives the indices of those occurring in `text`."""

    def __init__(self, strings: list[str]) -> None:
        self.goto: list[dict[str, int]] = [{}]
        self.ends: list[list[int]] = [[]]  # indices of the strings that end at a state
        for index, string in enumerate(strings):
            state = 0
            for char in string:
                following = self.goto[state].get(char)
                if following is None:
                    following = len(self.goto)
                    self.goto[state][char] = following
                    self.goto.append({})
                    self.ends.append([])
                state = following
            self.ends[state].append(index)
        self.fail = [0] * len(self.goto)
        self.output = [-1] * len(self.goto)  # the nearest state on the fail chain where strings end; -1: none
        self._links()

    def _links(self) -> None:
        """Fail links (the longest proper suffix that is a state) and output links, breadth first."""
        queue = deque(self.goto[0].values())
        while queue:
            state = queue.popleft()
            for char, following in self.goto[state].items():
                queue.append(following)
                back = self.fail[state]
                while back and char not in self.goto[back]:
                    back = self.fail[back]
                target = self.goto[back].get(char, 0)
                self.fail[following] = target if target != following else 0
                link = self.fail[following]
                self.output[following] = link if self.ends[link] else self.output[link]

    def found(self, text: str) -> set[int]:
        """Indices of the strings that occur in `text`: one step a character, then each output chain followed
        until it meets a state already counted (work bounded by the text and the strings found)."""
        goto, fail = self.goto, self.fail
        state = 0
        visited: set[int] = set()
        for char in text:
            while state and char not in goto[state]:
                state = fail[state]
            state = goto[state].get(char, 0)
            visited.add(state)
        found: set[int] = set()
        counted: set[int] = set()
        for state in visited:
            while state > 0 and state not in counted:
                counted.add(state)
                found.update(self.ends[state])
                state = self.output[state]
        return found
