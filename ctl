enable
