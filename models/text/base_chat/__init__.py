"""Chat with pretrained (base) models: tell them apart, and talk to them through a scaffold."""
