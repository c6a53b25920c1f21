"""URLs of the runs app (namespace "runs")."""

from django.urls import include, path

from runs import views

app_name = "runs"

urlpatterns = [
    path("", views.index, name="index"),
    path("", include("runs.api_urls")),
    path("", include("runs.page_urls")),
    path("", include("runs.agui.urls")),
]
