"""What the model is: layers, attention, MoE, parameters, quantization, KV cache; the witnesses and their agreement."""
