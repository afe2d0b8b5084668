"""Figures shared by the families and the report: the house style (``common``), attention heatmaps as HTML
(``heatmaps``) and statistics against the epoch (``training``). A family's own figures sit in its folder."""
