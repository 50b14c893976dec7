"""llama-server's utility routes on Ember's engine: /tokenize, /detokenize, /apply-template,
/infill (fill-in-the-middle) and /metrics (Prometheus text, with `ember serve --metrics`)."""
