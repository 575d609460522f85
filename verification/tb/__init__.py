"""cocotb testbenches: drivers, monitors, scoreboards, and the tests themselves."""
