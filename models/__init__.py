"""MoE blocks that route with the ascend.moe ops, each with a plain-torch reference path."""
