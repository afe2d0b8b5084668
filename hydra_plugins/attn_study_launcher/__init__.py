"""attn_study's Hydra launcher plugin (Hydra only loads plugins from the ``hydra_plugins`` namespace)."""
