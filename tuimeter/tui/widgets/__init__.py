"""The UI's widgets, one per private module."""

from ._domain_table import COLUMNS, Column, DomainTable, RowData
from ._job_panel import JobPanel
from ._power_chart import PowerChart, series_marker
from ._process_panel import PROCESS_KEYS, ProcessPanel
from ._profile_panel import ProfilePanel
from ._sensor_status import SensorStatusLine
from ._top_bar import TopBar
from ._totals_panel import TotalsPanel

__all__ = ["COLUMNS", "Column", "DomainTable", "JobPanel", "PowerChart",
           "PROCESS_KEYS", "ProcessPanel", "ProfilePanel", "RowData",
           "SensorStatusLine", "TopBar", "TotalsPanel", "series_marker"]
