"""What a host's hooks capture, made safe to keep."""
