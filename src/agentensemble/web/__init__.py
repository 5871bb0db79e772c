"""The live dashboard: ``pip install "agentensemble[web]"``, then
``Ensemble(..., web_dashboard=WebDashboard())``. See `WebDashboard`."""

from agentensemble.web._dashboard import DashboardListener, WebDashboard, WebReviewHandler

__all__ = ["DashboardListener", "WebDashboard", "WebReviewHandler"]
