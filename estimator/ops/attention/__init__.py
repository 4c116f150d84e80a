"""Attention ops (context, generation) and their helpers: kernel lanes, side ops, head-size transfer."""
