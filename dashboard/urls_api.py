from django.urls import path

from dashboard import audit_api

urlpatterns = [
    path("records/", audit_api.AuditRecordsApi.as_view(), name="audit-records"),
    path("events/<slug:slug>/verify", audit_api.AuditVerifyApi.as_view(), name="audit-verify"),
    path("events/<slug:slug>/report", audit_api.AuditReportApi.as_view(), name="audit-report"),
]
