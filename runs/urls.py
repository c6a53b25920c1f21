"""URLs of the runs app (namespace "runs")."""

from django.urls import path

from runs import views

app_name = "runs"

urlpatterns = [
    path("", views.index, name="index"),
]
