"""gpt-oss (gpt-oss-20b / -120b; GGUF general.architecture "gpt-oss"): a MoE decoder whose
attention has biases on q/k/v/o and a learned sink logit per head (layers/attention_sinks.py),
alternating 128-token sliding-window and full layers, YaRN RoPE, and routed experts with biases,
top-k-then-softmax routing and a clamped SwiGLU (layers/moe.py, layers/gated_activation.py);
its FFN pre-norm is the file's post_attention_norm."""

from ember.engine.runners.torch.arch.spec import ArchSpec

GPTOSS = ArchSpec(name="gpt-oss", ffn_norm="post_attention_norm")
