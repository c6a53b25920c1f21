"""Page URLs of the notebook UI; included by runs/urls.py, so names live in the "runs" namespace."""

from django.urls import path

from runs import event_values, fork_views, page_views, token_views

urlpatterns = [
    path("new/", page_views.new_notebook, name="notebook_new"),
    path("tasks/<int:pk>/", page_views.notebook, name="notebook"),
    path(
        "tasks/<int:pk>/events/<int:seq>/value",
        event_values.event_value,
        name="event_value",
    ),
    path("traces/", page_views.trace_list, name="traces"),
    path("traces/compare/", fork_views.compare, name="compare"),
    path("traces/<int:pk>/", page_views.trace, name="trace"),
    path("settings/tokens/", token_views.api_tokens, name="api_tokens"),
    path(
        "settings/tokens/<int:pk>/revoke",
        token_views.revoke,
        name="api_token_revoke",
    ),
]
