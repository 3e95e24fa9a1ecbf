// The monitoring role of the SQL snapshot tests: test-support's, which the operator's tests
// use too (monitoring-role.ts there).
export { MONITOR_ROLE, setUpMonitoringRole } from '@pglog/test-support/monitoring-role.ts';
