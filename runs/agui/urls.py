"""URL of the AG-UI endpoint; runs/urls.py includes it in the "runs" namespace."""

from django.urls import path

from runs.agui import views

urlpatterns = [path("agui/", views.run_agent, name="agui_run")]
