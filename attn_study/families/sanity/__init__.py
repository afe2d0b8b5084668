"""Randomisation sanity checks (Adebayo et al. 2018): does an explanation change when the model is destroyed?"""
