"""Root URLs: login, admin and the runs app; error answers (agentui/errors.py)."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path

from agentui.login_limit import limit_password_checks
from agentui.security import csp_report
from runs.rest.api import urls as rest_api_urls
from runs.web import operations
from runs.web.views import login_with_link


@login_not_required
def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    """The app's icon where browsers look for it on a page that names none (JSON, errors)."""
    return HttpResponsePermanentRedirect(static("img/favicon.svg"))


urlpatterns = [
    path("favicon.ico", favicon),
    path(
        "login/",
        limit_password_checks(auth_views.LoginView.as_view()),
        name="login",
    ),
    path("login/<str:token>/", login_with_link, name="login_link"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/login/", limit_password_checks(admin.site.login)),
    path("admin/", admin.site.urls),
    # for load balancers, orchestrators and Prometheus (docs/operations.md)
    path("healthz", operations.healthz, name="healthz"),
    path("readyz", operations.readyz, name="readyz"),
    path("metrics", operations.metrics, name="metrics"),
    path("csp-report/", csp_report, name="csp_report"),
    # the REST API for scripts (docs/api.md); the page's own JSON endpoints stay under /api/
    path("api/v1/", rest_api_urls),
    path("", include("runs.urls")),
]

# With DEBUG off: JSON under /api/ and /agui/, Django's plain pages elsewhere.
handler400 = "agentui.errors.bad_request"
handler403 = "agentui.errors.permission_denied"
handler404 = "agentui.errors.page_not_found"
handler500 = "agentui.errors.server_error"
