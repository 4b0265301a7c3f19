from django.urls import path

from dashboard import audit_home, oidc, report_views, views
from dashboard.sign_in import SignInView, SignOutView

urlpatterns = [
    path("", audit_home.dashboard_landing, name="dashboard"),
    path("sign-in/", SignInView.as_view(), name="dashboard-sign-in"),
    path("sign-out/", SignOutView.as_view(), name="dashboard-sign-out"),
    # The library's URL names, which it reverses itself (mozilla-django-oidc).
    path("oidc/authenticate/", oidc.oidc_authenticate, name="oidc_authentication_init"),
    path("oidc/callback/", oidc.oidc_callback, name="oidc_authentication_callback"),
    path("audit/", audit_home.audit_home, name="dashboard-audit"),
    path("audit/<slug:slug>/verify", audit_home.audit_verify, name="dashboard-audit-verify"),
    path("catalogue/figures", views.catalogue_figures, name="dashboard-catalogue-figures"),
    path("events/<slug:slug>/", views.event_page, name="dashboard-event"),
    path("events/<slug:slug>/stats", views.event_stats, name="dashboard-event-stats"),
    path("events/<slug:slug>/control", views.event_control, name="dashboard-event-control"),
    path("events/<slug:slug>/message", views.event_message, name="dashboard-event-message"),
    path(
        "events/<slug:slug>/registration",
        views.event_registration,
        name="dashboard-event-registration",
    ),
    path("events/<slug:slug>/preview", views.event_preview, name="dashboard-event-preview"),
    path("events/<slug:slug>/report", report_views.report_page, name="dashboard-event-report"),
    path(
        "events/<slug:slug>/report.csv",
        report_views.report_download,
        name="dashboard-event-report-csv",
    ),
]
