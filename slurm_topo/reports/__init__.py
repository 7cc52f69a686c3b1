"""Pictures and reports of the fleet and its jobs (they read, never decide): the filter's decision
explained (``explain``), what the fleet can hold (``capacity``), trees and pictures (``show``, ``svg``,
``svg_overlay``), finished jobs' locality and cost (``report``, ``report_html``) and Prometheus
metrics (``metrics``).
"""
