"""The dense families issue 24 added (one file each), gathered so the registry names them once."""

from ember.engine.runners.torch.arch.gemma2 import GEMMA2
from ember.engine.runners.torch.arch.mistral3 import MISTRAL3
from ember.engine.runners.torch.arch.phi3 import PHI3
from ember.engine.runners.torch.arch.smollm3 import SMOLLM3

DENSE_2026 = (PHI3, GEMMA2, SMOLLM3, MISTRAL3)
