"""Reproductions of the papers' experiments: ``li2023`` (Li, John & Solin 2023, Table 1),
``bui2017`` (Bui, Yan & Turner 2017, §4.1) and ``challis2013`` (Challis & Barber 2013,
§6.2's synthetic logistic regression)."""
