"""A FakeRunner that reasons forever: it opens <think>, counts "1 2 3 ..." (no cycle, so the
loop detector lets it go on) until its context holds </think>, then answers "It rains." and ends its turn. Its logits are the script's next byte
(one-hot, far above the rest), read from the context through the block table like any logit,
so it runs through the real engine: scheduler, sampling, drafts and the reasoning budget."""

from __future__ import annotations

import numpy as np

from ember.engine.runners.fake import EOT_ID, FakeRunner

THINK, CLOSE, ANSWER = b"<think>", b"</think>", b"It rains."
THOUGHT = " ".join(str(i) for i in range(1, 5000)).encode()  # ~24k bytes of reasoning
SCRIPT_LOGIT = 40.0


class ThinkingFakeRunner(FakeRunner):
    """The reply after the prompt's last "assistant: " follows the script above."""

    def _score(self, keys: np.ndarray, key_pos: np.ndarray, query_pos: int) -> np.ndarray:
        logits = super()._score(keys, key_pos, query_pos)
        text = b"".join(self.tokenizer.token_bytes(int(k)) for k in keys)
        reply = text[text.rfind(b"assistant: ") + len(b"assistant: ") :]
        out = np.zeros_like(logits)
        out[self._next(reply)] = SCRIPT_LOGIT
        return logits * 0.01 + out

    def _next(self, reply: bytes) -> int:
        if CLOSE in reply:
            answer = reply[reply.index(CLOSE) + len(CLOSE) :]
            return EOT_ID if len(answer) >= len(ANSWER) else self._byte(ANSWER[len(answer)])
        if len(reply) < len(THINK):
            return self._byte(THINK[len(reply)])
        thought = reply[len(THINK) :]
        return self._byte(THOUGHT[len(thought) % len(THOUGHT)])

    def _byte(self, value: int) -> int:
        return self.tokenizer.encode(chr(value))[0]
