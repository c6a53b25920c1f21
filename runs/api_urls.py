"""URLs of the notebook service's HTTP endpoints; runs/urls.py includes them in the "runs" namespace."""

from django.urls import path

from runs import annotations, api_views, fork_views, image_views

urlpatterns = [
    path("tasks/new", api_views.new_task, name="task_new"),
    path("api/tasks/", api_views.task_list, name="api_tasks"),
    path("api/tasks/<int:pk>/trace.json", api_views.task_trace, name="api_task_trace"),
    path(
        "api/tasks/<int:pk>/result.csv",
        api_views.task_result_csv,
        name="api_task_result_csv",
    ),
    path("api/presets/", api_views.preset_list, name="api_presets"),
    path("api/images/", image_views.upload_image, name="api_images"),
    path("images/<int:pk>/", image_views.image, name="image"),
    path("demo/sample-chart.png", image_views.sample_chart, name="sample_chart"),
    path("api/tasks/<int:pk>/fork/", fork_views.fork_task, name="api_task_fork"),
    path(
        "api/tasks/<int:pk>/annotations/",
        annotations.task_annotations,
        name="api_task_annotations",
    ),
]
