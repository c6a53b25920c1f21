"""URLs of the runs app (namespace "runs")."""

from django.urls import include, path

from runs.web import views

app_name = "runs"

urlpatterns = [
    path("", views.index, name="index"),
    path("", include("runs.web.json_urls")),
    path("", include("runs.web.page_urls")),
    path("", include("runs.agui.urls")),
]
